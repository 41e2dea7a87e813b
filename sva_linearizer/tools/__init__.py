"""Tools that measure the package from outside its layers: the compile report."""
