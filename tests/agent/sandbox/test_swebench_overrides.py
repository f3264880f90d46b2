"""ooda's data-level overrides of SWE-bench's specs reach the environment specs (each fixes a
build or test failure measured by bench/swebench; docs/PERFORMANCE.md lists them)."""

from __future__ import annotations

from ooda.agent.sandbox.environments import swebench


def test_overrides_fix_what_the_harness_specs_cannot_build_or_run_today() -> None:
    sqlfluff = swebench.spec_for("sqlfluff/sqlfluff", "0.6")
    assert sqlfluff.requirements == () and "pytest" in sqlfluff.pip
    assert not any("pkg_resources" in p for p in sqlfluff.pip)
    assert any("setuptools>=64" in c for c in swebench.spec_for("pylint-dev/astroid", "2.14")
               .pre_install)
    pylint = swebench.spec_for("pylint-dev/pylint", "2.15")
    assert pylint.install is not None and "types-pkg_resources" in pylint.install
    assert "pytest==7.4.4" in swebench.spec_for("pydicom/pydicom", "2.1").pip
    assert swebench.spec_for("pydicom/pydicom", "1.3").debian.name == "bullseye"
    assert "numpy<2" in swebench.spec_for("pvlib/pvlib-python", "0.9").pip
    astropy = swebench.spec_for("astropy/astropy", "1.3")
    assert astropy.debian.name == "bullseye"
    # numpy before 1.19 (no ndarray.tostring() deprecation, an error in astropy 1.3's tests),
    # built from its sdist: no numpy pin left for pip to install first
    assert any("numpy==1.18.5" in c and "--no-build-isolation" in c for c in astropy.pre_install)
    assert not any(p.startswith("numpy") for p in astropy.pip)
    requests = swebench.spec_for("psf/requests", "2.7")
    assert any(p.startswith("httpbin") for p in requests.pip)
    assert any("HTTPBIN_URL" in c for c in requests.runner.pre_test)


def test_versions_without_an_override_keep_the_harness_values() -> None:
    astroid = swebench.spec_for("pylint-dev/astroid", "2.10")
    assert astroid.pre_install == () and astroid.pip == ("pytest",)
    assert swebench.spec_for("sympy/sympy", "1.1").apt == swebench.HARNESS_APT


def test_every_environment_has_the_build_tools_of_the_harness_image() -> None:
    """The harness's base image has a compiler (astropy-14182 built no C extension without
    one); each version's own apt packages follow, once each."""
    for repo, version in (("astropy/astropy", "4.3"), ("sympy/sympy", "1.1"),
                          ("django/django", "3.0")):
        apt = swebench.spec_for(repo, version).apt
        assert apt[:len(swebench.HARNESS_APT)] == swebench.HARNESS_APT
        assert "build-essential" in apt and "python3-dev" in apt and len(set(apt)) == len(apt)


def test_every_override_names_a_known_repository_and_version_and_says_why() -> None:
    for path in sorted(swebench.OVERRIDES.glob("*.toml")):
        repo = path.stem.replace("__", "/")
        assert repo in swebench.repos(), path.name
        for version, table in swebench._overrides(repo).items():
            assert version == "*" or version in swebench.versions(repo), (path.name, version)
            assert str(table.get("note", "")).strip(), (path.name, version)
