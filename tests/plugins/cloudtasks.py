"""Fixtures for the local Cloud Tasks emulator (filled in by the Cloud Tasks emulator work)."""
