"""The apps that ship with hookledger, each on the public API (shared/api) only:
`review` (the Markdown review), `articles` (a repository's articles synced on each push)
and `classify` (Gemini batches of the user's own kind). See docs/apps.md."""
