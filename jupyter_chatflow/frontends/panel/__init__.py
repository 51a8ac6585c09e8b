"""The inspector panel: an anywidget (`ChatWidget`) and what feeds it."""
