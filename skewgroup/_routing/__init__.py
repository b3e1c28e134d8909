"""Routing: the strategies' configurations, key hashing, the :class:`Partitioner` over the
native routers (the C core, ``csrc/``) and the checks of a router's state read back."""
