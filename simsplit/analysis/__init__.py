"""Analysis of MD trajectories (H5MD or GSD): radial distribution functions per type pair
(:mod:`.rdf`), mean-squared displacements from unwrapped positions (:mod:`.msd`), and the HDF5
file and PNG plots of ``simsplit analyze`` (:mod:`.report`)."""
