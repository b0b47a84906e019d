"""nodecheck: prove a GPU cluster's nodes are fit before the job starts."""

__version__ = "0.6.0"
