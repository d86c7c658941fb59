"""The PA-SPS Twitter application as an elastic-sps user project."""
