"""JetStream: streams, consumers, configs and infos, built on the client's public API."""
