"""elastic-sps common library: the interfaces and models every service and the simulator share."""
