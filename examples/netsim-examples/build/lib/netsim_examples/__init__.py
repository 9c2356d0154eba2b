"""Example netsim components in a package of their own (see ``docs/components.md``)."""
