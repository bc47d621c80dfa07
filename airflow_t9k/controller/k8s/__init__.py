"""The controller's I/O: a raw-JSON client, informers that cache what they watch, and the
executor that carries out a plan. Nothing here decides anything."""
