"""Hooks on the cncf-kubernetes provider's ``kubernetes`` connection."""
