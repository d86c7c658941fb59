"""The PySpark dataplane: one Structured Streaming query per operator, reading its Kafka
topic through a Python data source that plans one task per active replica."""
