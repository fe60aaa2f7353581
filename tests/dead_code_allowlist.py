# ruff: noqa
"""What vulture (`make test`'s dead-code check, configured in pyproject.toml) cannot see used.

Each name here is used from outside Python's view: by a library that reads an attribute or
calls a hook by name, by a YAML file that names a handler, by uvicorn or locust loading a
factory, by a wire schema's fields. A name that is dead code does not belong here: delete it.
"""

# Attributes third-party objects read: sqlite3/psycopg connections and cursors, uvicorn servers,
# LiteLLM's module switches, onnxruntime's session options, typing's annotations.
_.row_factory
_.itersize
_.should_exit
_.force_exit
_.telemetry
_.suppress_debug_info
_.drop_params
_.graph_optimization_level
_.log_severity_level
_.__annotations__
# The HTTP protocol's flags uvicorn's base protocol reads.
_.keep_alive
_.disconnected
# Hooks their framework calls by name: pydantic-settings, aiosmtpd, html.parser, http.server,
# locust, schemathesis.
_.settings_customise_sources
env_settings
dotenv_settings
file_secret_settings
_.get_field_value
_.handle_DATA
_.handle_starttag
_.handle_endtag
_.handle_data
_._create_server
_.do_GET
_.do_POST
_.log_message
_.wait_time
_.on_start
_options
_load_customers
_.output_model
filter_failure
# Factories loaded by name: `uvicorn app.main:worker_app --factory`, the bench's baselines.
worker_app
litellm_app
openai_app
# Tool handlers, prechecks, read-back resolvers and rule queries tools.yaml (and the tests' tools
# files) name.
contact_change_history
search_knowledge
refund_precheck
return_precheck
refund_left
refund_history
save_note
record_visit
slow_read
write_note
customer_record
notify_partner
bad_output
hang_write
read_file
paid_out
account_changes
account_check
what_is_left
known_customer
stock_check
WAREHOUSE
NOT_A_PROVIDER
# Fields of wire schemas and stored rows: read by serialisation, not by attribute.
events_url
tool_count
latency_p50_ms
old_status
new_status
next_after
resolved_at
resolved_turn_id
pending_steps
