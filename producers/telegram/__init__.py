"""The Telegram producer: the owner's messages and button presses, admitted then acknowledged (C2, C3).

`client` builds the python-telegram-bot `Bot`; `routing` authenticates and admits each update; `polling` and
`webhook` are the two ways updates arrive; `owner` answers commands and presses inside their admission.
"""
