"""Job graph layer: the logical plan built by the API, and its translation into chained
job vertices and channels that the runtime deploys."""
