"""Review sentiment as an elastic-sps user project: a CPU-bound scikit-learn operator."""
