"""The panels around the canvas: controls, metrics and stars, blame, a request's story, the tables, the twin comparison, the plots and the result strip."""
