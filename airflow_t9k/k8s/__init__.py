"""The I/O shared by the controller and the Airflow layer: a raw-JSON client, one error
vocabulary, and informers that cache what they watch. Nothing here decides anything."""
