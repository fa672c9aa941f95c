"""Analyses: one module per question; each returns data (rows, frames), never plots."""
