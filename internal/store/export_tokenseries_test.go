package store

// TokenSeriesQueryForTest is the query of TokenSeries.
const TokenSeriesQueryForTest = qTokenSeries
