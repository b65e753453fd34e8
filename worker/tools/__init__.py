"""The agent's typed tools: `registry` runs and journals them by effect kind, `shop` defines the shop's tools."""
