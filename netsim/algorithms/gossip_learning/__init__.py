"""Gossip learning: models spread and merged by push-pull gossip, trained with private SGD
at each node (the ``gossip_learning`` section)."""
