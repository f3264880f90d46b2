"""Contracts: every Protocol and result type the layers share (stdlib only)."""
