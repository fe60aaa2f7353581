"""The call centre's own documents: parsed, chunked, stored and searched."""
