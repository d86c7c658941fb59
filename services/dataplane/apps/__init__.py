"""Two of the built-in example applications (``log``, ``advertising``), as ordinary user
code: their topologies name each operator's function by ``code:``, as a user's topology
does (the Twitter application is a user project of its own, ``examples/twitter``)."""
