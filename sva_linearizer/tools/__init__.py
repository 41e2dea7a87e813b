"""Tools beside the package's layers: the compile report, the outputs check, the figures of
`sva-linearizer plot`."""
