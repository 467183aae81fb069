"""The package version, in a module of its own so that writers of files can stamp it without
importing the package's front door."""

__version__ = "0.1.0"
