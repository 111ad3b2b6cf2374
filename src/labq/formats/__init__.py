"""Job formats: native YAML/JSON, Beaker job XML and Teuthology-style YAML."""
