"""The network: topologies, links, node online state and churn."""
