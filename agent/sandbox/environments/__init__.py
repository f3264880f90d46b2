"""Environments: the image a task's tests run in, described as data and built once per hash.

- releases.py (+ releases.toml): Debian releases and the Python each serves;
- spec.py: the spec (Python, apt, pip pins, pre-install, the repository's install, the test
  runner's packages) and its content hash, which names the image `ooda-env:<hash>`;
- hostconfig.py: the host's registry settings (CA bundle, pip indexes, proxies) for builds;
- base.py: one debootstrapped base image per release;
- container.py: run a build script in a networked container and commit it;
- builder.py: build an environment once (locked), record failures with their one-line cause;
- causes.py: that one line, found in pip's and apt's output;
- rootfs.py: an image's filesystem as a directory, for bwrap;
- swebench.py (+ swebench_specs.json, swebench_overrides/): SWE-bench's per-repository, per-version specs and ooda's changes to them.

Only the build step has a network; verification containers from these images have none.
"""
