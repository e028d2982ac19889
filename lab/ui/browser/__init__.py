"""The page's bridges to the browser (address, keys, storage access, uploads, accessibility) and the Panel/Bokeh shims and timers they need."""
