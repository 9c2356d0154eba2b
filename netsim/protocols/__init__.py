"""Protocols running on the network: push-pull gossip and what uses it."""
