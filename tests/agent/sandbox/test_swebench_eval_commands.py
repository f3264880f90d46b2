"""The harness's eval_commands split by where they belong: a command that changes the system
(django 3.x's locale generation, as root) runs once in the environment's build; the exports stay
at test time, run before every test run (the runner's pre_test)."""

from __future__ import annotations

from ooda.agent.sandbox.environments import swebench
from ooda.agent.sandbox.environments.spec import spec_hash


def test_django_locale_generation_moves_to_the_build_and_its_exports_stay() -> None:
    spec = swebench.spec_for("django/django", "3.0")
    assert spec.pre_install == ("sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen",)
    assert "locales" in spec.apt  # the harness's base image has it, ooda's has not
    assert spec.runner.pre_test == ("export LANG=en_US.UTF-8", "export LANGUAGE=en_US:en",
                                    "export LC_ALL=en_US.UTF-8")
    assert spec.runner.kind == "django"
    older = swebench.spec_for("django/django", "2.2")  # installs and generates it in pre_install
    assert older.pre_install[-1] == "locale-gen en_US.UTF-8" and "locales" not in older.apt
    assert all(c.startswith("export ") for c in older.runner.pre_test)


def test_pre_test_commands_are_not_part_of_the_image() -> None:
    from dataclasses import replace

    spec = swebench.spec_for("psf/requests", "2.7")
    assert any("httpbin" in c for c in spec.runner.pre_test)  # the override's, as they are
    bare = replace(spec, runner=replace(spec.runner, pre_test=()))
    assert spec_hash(spec) == spec_hash(bare)
