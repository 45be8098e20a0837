//! Trace importers: Alibaba cluster-trace-v2018, the Standard Workload Format and YARN SLS JSON,
//! each turned into a [`weir_model::Workload`].
