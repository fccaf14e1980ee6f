"""What the pipeline reads from disk: where things live (`paths`), the scenario catalog (`scenarios`) and the
sweep configs (`sweeps`)."""
