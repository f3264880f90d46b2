"""The Docker sandbox backend: container launch, its PID 1 (zygote), the backend, the image in
Docker. See README.md."""
