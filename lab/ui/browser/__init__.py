"""The page's bridges to the browser (address, keys, storage access, uploads, accessibility), the Panel/Bokeh shims and timers they need, and the figures' trim of models the page never draws."""
