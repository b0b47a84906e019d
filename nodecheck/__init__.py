"""nodecheck: prove a GPU cluster's nodes are fit before the job starts."""

__version__ = "0.7.0"
