"""Tasks: loading task directories, importing public benchmarks, and the bundled examples."""
