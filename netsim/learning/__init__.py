"""Machine learning on netsim: data sets and pre-processing for decentralised private SGD."""
