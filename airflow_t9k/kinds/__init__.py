"""One pure module per job kind, and the registry of the kinds the controller reconciles."""
