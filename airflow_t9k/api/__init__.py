"""Pure vocabulary shared by every layer: the job resources and how to read their status."""
