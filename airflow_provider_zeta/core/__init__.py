"""The I/O-free coordination core: every rule of the provider lives here and is tested here."""
