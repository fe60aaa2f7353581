"""The demo shop's call-centre tools: each handler takes `ToolContext[ShopBackend]`."""
