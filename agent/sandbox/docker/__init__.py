"""The Docker sandbox backend: container launch, zygote, backend."""
