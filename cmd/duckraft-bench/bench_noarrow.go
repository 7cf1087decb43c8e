//go:build !duckdb_arrow

package main

func scanArrow(string, string) (scanReport, error) { return scanReport{}, errNoArrow }
