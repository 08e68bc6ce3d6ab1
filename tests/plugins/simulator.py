"""Fixtures for the local Gemini + GitHub simulator (filled in by the simulator work)."""
