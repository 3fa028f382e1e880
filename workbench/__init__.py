"""The Streamlit app's own helpers: session state, the schema as an editable table, plotly charts.

Pages call these and the synthesis core (synth_core); the core never imports Streamlit.
"""
