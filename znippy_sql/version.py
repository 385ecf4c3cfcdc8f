"""The package's version (``znippy_sql.__version__``; pyproject.toml says the same), which
the provenance an archive records names (``created_by``)."""

__version__ = "0.1.0"
