// Every library target needs one source; loom::loom is made of the floor libraries linked whole.
