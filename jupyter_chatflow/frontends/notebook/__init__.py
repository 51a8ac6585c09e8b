"""The notebook front end: the `%%chat` magics and the cell's rendered turn."""
